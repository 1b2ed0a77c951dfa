"""Playbooks: the .pb program format, the agent loop, frames and primitives."""
