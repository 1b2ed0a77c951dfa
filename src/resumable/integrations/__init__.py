"""Durable execution for agent frameworks; each integration needs its extra installed."""
