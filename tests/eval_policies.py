"""TEST ONLY: policy entry points for the evaluation tests (loaded by path like a user's plugin)."""

from __future__ import annotations

from rl_pipeline_bench.eval.policies.scripted import ScriptedLift


class CrashesOnSecondEpisode(ScriptedLift):
    """The scripted baseline, except that its second episode raises mid-way."""

    def __init__(self):
        self.episodes = -1  # ScriptedLift.__init__ resets once
        super().__init__()

    def reset(self, task, language):
        super().reset(task, language)
        self.episodes += 1

    def act(self, observation):
        if self.episodes == 2:
            raise RuntimeError("policy exploded in episode 2")
        return super().act(observation)


def crashing(path: str) -> CrashesOnSecondEpisode:
    return CrashesOnSecondEpisode()
