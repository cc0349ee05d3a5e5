"""The range scheduler's jobs run on threads (`run_pooled` takes any `JobRunner`): the schedule's
own logic tested against a real executor, with work that is not a part writer."""

from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait


class ThreadRunner:
    """Each job run as `job.run(work)` on `executor`."""

    def __init__(self, executor: Executor, work: object):
        self._executor, self._work = executor, work
        self._futures: dict[Future, object] = {}

    def start(self, job) -> None:
        self._futures[self._executor.submit(job.run, self._work)] = job

    def finished(self, timeout: float | None) -> list:
        done, _ = wait(self._futures, timeout, return_when=FIRST_COMPLETED)
        return [(self._futures.pop(f), f.result()) for f in done]
