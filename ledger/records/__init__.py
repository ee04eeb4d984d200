"""Pure: a record and its events as bytes and values — canonical bytes, identifiers, typed models, keys, event rules, bundles, minting, display metadata and OpenTimestamps reading."""
