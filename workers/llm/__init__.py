"""LLM agents: a model behind any OpenAI-compatible chat-completions endpoint plays as an agent
(docs/alympics.md, "Evaluating a model"). The cluster's shared parts (rate limits, the replay
cache, the cost spent) come in through the Protocols of services.py."""
