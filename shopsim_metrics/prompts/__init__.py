"""Prompts: keys, history, value, and skipping before generation."""
