"""A verifiers v0 `ToolEnv` for the tool tests (imported only in a verifiers 0.3 Python): one
task, one tool (`add`), rewarded 1.0 when the answer holds the sum."""


def add(a: int, b: int) -> int:
    """Adds two integers.

    Args:
        a: The first integer.
        b: The second integer.
    """
    return a + b


def load_environment(max_turns: int = 3):
    import verifiers as vf
    from datasets import Dataset

    dataset = Dataset.from_list([{"question": "What is 2 + 3? Use the add tool.", "answer": "5"}])

    def correct(completion, answer, **kwargs) -> float:
        last = completion[-1]
        text = last.get("content") if isinstance(last, dict) else getattr(last, "content", "")
        return 1.0 if answer in (text or "") else 0.0

    return vf.ToolEnv(dataset=dataset, tools=[add], max_turns=max_turns, rubric=vf.Rubric(funcs=[correct]))
