"""Client and worker for a needle mesh, standard library only.

``Client`` calls the HTTP API of any peer (submit tasks and groups, get,
wait, cancel, list, retry, logs). ``Worker`` serves handlers written in
Python over the worker protocol: it polls a peer for the tasks of its
handlers, runs them in threads and reports each outcome.

    from needle_client import Worker, Permanent

    def resize(task):
        if "url" not in task.payload:
            raise Permanent("payload needs a url")
        return {"ok": task.payload["url"]}

    Worker({"resize": resize}, concurrency=4).run()   # until SIGTERM
"""

from .client import Client, NeedleError, TERMINAL
from .worker import Permanent, Task, Worker

__all__ = ["Client", "NeedleError", "Permanent", "Task", "Worker", "TERMINAL"]
__version__ = "0.1.0"
