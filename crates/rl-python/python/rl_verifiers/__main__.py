"""`python -m rl_verifiers KIND ENV_FILE serve|process ARGS...`: what `python -m rl_env` runs
when `RL_ENV_KIND` names a verifiers kind, callable directly."""

import sys

from rl_verifiers import main, say

if __name__ == "__main__":
    if len(sys.argv) < 3:
        say("usage: python -m rl_verifiers verifiers-v0|verifiers-v1 ENV_FILE serve|process ARGS...")
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
