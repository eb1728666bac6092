"""citeguard serve: the HTTP service (the gateway endpoints live in gateway_routes)."""
