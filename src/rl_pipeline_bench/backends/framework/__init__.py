"""The framework kit: what the framework drivers (ART, SkyRL) share: the OpenAI-compatible rollout, support checks in the framework's own environment, signals on an event loop."""
