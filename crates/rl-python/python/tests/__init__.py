"""Unit tests of rl_trainer's pure parts (stdlib unittest):

    python -m unittest discover -s crates/rl-python/python/tests -t crates/rl-python/python
"""
