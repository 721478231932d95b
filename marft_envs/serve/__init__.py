"""Any registered Flex-MG environment as an OpenEnv server, with a multi-agent extension.

Needs the ``serve`` extra (``pip install "marft-envs[serve]"``): the real ``openenv`` package.

    marft-envs serve math-3agent --port 8000 --max-sessions 64      # the server
    from marft_envs.serve import MarftEnvClient, MarftAction          # the client
    from marft_envs.serve import MarftBatchClient      # many sessions per frame (/marft/ws)

The protocol is documented in docs/integrations.md.
"""

try:
    import openenv.core  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the install
    raise ImportError('marft_envs.serve needs openenv: pip install "marft-envs[serve]"') from e

from .app import create_server_app, serve
from .batch import BATCH_PATH
from .client import BatchError, MarftBatchClient, MarftEnvClient, SyncMarftBatchClient
from .environment import SERVER_POLICIES, MarftEnvironment
from .models import MarftAction, MarftObservation, MarftState

__all__ = [
    "BATCH_PATH",
    "SERVER_POLICIES",
    "BatchError",
    "MarftAction",
    "MarftBatchClient",
    "MarftEnvClient",
    "MarftEnvironment",
    "MarftObservation",
    "MarftState",
    "SyncMarftBatchClient",
    "create_server_app",
    "serve",
]
