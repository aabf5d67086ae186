"""MCP servers as a tool source: connections (`connection`), result mapping (`results`) and
the manager that offers their tools to the agent (`manager`)."""
