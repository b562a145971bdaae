"""Set-up helpers several test packages share (one module a topic)."""
