"""The order-desk demo: a durable Google ADK session."""
