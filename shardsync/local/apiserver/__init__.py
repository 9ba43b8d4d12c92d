"""The embedded Kubernetes API server: enough of the real REST API (CRUD, watch, discovery, CRDs) for the
official client and kubectl, plus fault injection for tests. `serve(port=0)` runs one in-process."""

from shardsync.local.apiserver.admin import RemoteFaults
from shardsync.local.apiserver.faults import Faults
from shardsync.local.apiserver.process import ApiServerProcess
from shardsync.local.apiserver.server import ApiServer, serve
from shardsync.local.apiserver.store import Store

# What tests drive: a server's faults in this process or, over its admin endpoint, in another.
FaultControl = Faults | RemoteFaults

__all__ = ["ApiServer", "ApiServerProcess", "FaultControl", "Faults", "Store", "serve"]
