"""citeguard: refuse to let a search agent's bad citations through."""
