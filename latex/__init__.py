"""The `pith` LaTeX package (pith.sty) and its example, shipped as package data of pithledger.latex (spec/badge-and-latex.md §2)."""
