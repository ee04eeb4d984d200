"""``pithledger serve``: routes, pages, the connection guard and the action endpoints."""
