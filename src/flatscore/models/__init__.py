"""Model backends: the interface, OpenAI-compatible endpoints, local torch models, serving."""
