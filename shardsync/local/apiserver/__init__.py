"""The embedded Kubernetes API server: enough of the real REST API (CRUD, watch, discovery, CRDs) for the
official client and kubectl, plus fault injection for tests. `serve(port=0)` runs one in-process."""

from shardsync.local.apiserver.faults import FaultControl, Faults
from shardsync.local.apiserver.process import ApiServerProcess
from shardsync.local.apiserver.server import ApiServer, serve
from shardsync.local.apiserver.store import Store

__all__ = ["ApiServer", "ApiServerProcess", "FaultControl", "Faults", "Store", "serve"]
