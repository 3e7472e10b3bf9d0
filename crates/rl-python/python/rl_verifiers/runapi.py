"""run-api's environment protocol, as atroposlib's `BaseEnv` speaks it (atroposlib 0.4.0,
`envs/base.py` and `api/server.py`), on the trainer's client (`rl_trainer.runapi`: one rule for
the bounded retries of transient failures):

- `POST /register-env` {max_token_length, desired_name, weight, min_batch_allocation,
  group_size}, asked again every second until its `status` is `success` (run-api answers
  "wait for trainer to start" until the trainer's first `GET /batch`);
- `GET /info` (the trainer's `max_token_len`), `GET /status-env` {env_id} (`current_step`,
  `queue_size` in groups of this environment's size);
- `POST /scored_data` with one group (`ScoredData`'s keys)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Dict, Optional

from rl_trainer.runapi import RunApi, RunApiError

# How often a registration run-api is not ready for is asked again (atroposlib: 1 s).
REGISTER_POLL_SECONDS = 1.0
# How often the wait for the trainer is said in the log.
SAY_EVERY_SECONDS = 30.0

__all__ = ["EnvironmentApi", "RunApiError"]


class EnvironmentApi(RunApi):
    async def register_env(
        self, payload: Dict[str, Any], poll_secs: float = REGISTER_POLL_SECONDS, say: Optional[Callable[[str], None]] = None
    ) -> Dict[str, Any]:
        """Registers, waiting (unbounded, as atroposlib does: the supervisor bounds the run) until
        run-api takes it; its answer (`env_id`, `starting_step`, `num_steps` …)."""
        say = say or self.say
        start = time.monotonic()
        last_said = start
        while True:
            answer = await self._request("POST", "/register-env", payload)
            if not isinstance(answer, dict):
                raise RunApiError(f"POST /register-env answered {str(answer)[:200]!r}")
            if answer.get("status") == "success":
                if not isinstance(answer.get("env_id"), int):
                    raise RunApiError(f"POST /register-env answered no env_id: {str(answer)[:200]!r}")
                return answer
            now = time.monotonic()
            if now - last_said >= SAY_EVERY_SECONDS:
                say(f"run-api has not taken the registration yet ({answer.get('status')!r}, {now - start:.0f} s)")
                last_said = now
            await asyncio.sleep(poll_secs)

    async def info(self) -> Dict[str, Any]:
        answer = await self._request("GET", "/info")
        if not isinstance(answer, dict):
            raise RunApiError(f"GET /info answered {str(answer)[:200]!r}")
        return answer

    async def status_env(self, env_id: int) -> Dict[str, Any]:
        answer = await self._request("GET", "/status-env", {"env_id": env_id})
        if not isinstance(answer, dict) or not isinstance(answer.get("current_step"), int):
            raise RunApiError(f"GET /status-env answered {str(answer)[:200]!r}")
        return answer

    async def send_group(self, group: Dict[str, Any]) -> Dict[str, Any]:
        answer = await self._request("POST", "/scored_data", group)
        if not isinstance(answer, dict) or answer.get("status") not in ("received", "buffered"):
            raise RunApiError(f"POST /scored_data answered {str(answer)[:200]!r}")
        return answer
