"""Pure rendering shared by publish and serve: record pages, Pith's record document, the badge, the LaTeX package."""
