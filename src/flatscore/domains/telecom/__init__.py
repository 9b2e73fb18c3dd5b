"""`telecom`: dual control. The agent has account tools (customers, lines, plans, bills); the
user holds a phone with its own tools, and the agent must tell the user what to do on it."""
