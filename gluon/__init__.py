"""Gluon-like explicit-layout language."""
