"""`retail`: single control. Customers, orders and products; the agent authenticates the
user, then reads orders and cancels, re-addresses, returns or exchanges under policy rules."""
