"""What tests/unit/render/test_badge.py and tests/e2e/render/test_badge.py share: A safe XML reading of the badge SVG:
no DTD, only the tags a badge may hold."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"


ALLOWED_TAGS = {"svg", "title", "clipPath", "rect", "g", "text"}


def parse_safe(data: bytes) -> ET.Element:
    """Parse as XML after refusing any DTD (no entities can expand), and check everything a safe embed
    needs: SVG elements only from a small drawing set, no event handler, no link, no reference that
    leaves the document."""
    text = data.decode("utf-8")
    assert "<!" not in text and "<?" not in text  # no DOCTYPE, ENTITY, CDATA or processing instruction
    root = ET.fromstring(text)
    assert root.tag == SVG + "svg"
    for el in root.iter():
        assert el.tag.startswith(SVG) and el.tag[len(SVG) :] in ALLOWED_TAGS, el.tag
        for name, value in el.attrib.items():
            assert not name.lower().startswith("on"), name
            assert "href" not in name.lower(), name
            assert "javascript" not in value.lower() and "//" not in value.replace("http://www.w3.org/2000/svg", "")
            for ref in re.findall(r"url\(([^)]*)\)", value):
                assert ref.startswith("#"), ref
    return root
