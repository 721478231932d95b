"""Any registered Flex-MG environment as an OpenEnv server, with a multi-agent extension.

Needs the ``serve`` extra (``pip install "marft-envs[serve]"``): the real ``openenv`` package.

    marft-envs serve math-3agent --port 8000 --max-sessions 64      # the server
    from marft_envs.serve import MarftEnvClient, MarftAction          # the client

The protocol is documented in docs/integrations.md.
"""

try:
    import openenv.core  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the install
    raise ImportError('marft_envs.serve needs openenv: pip install "marft-envs[serve]"') from e

from .app import create_server_app, serve
from .client import MarftEnvClient
from .environment import SERVER_POLICIES, MarftEnvironment
from .models import MarftAction, MarftObservation, MarftState

__all__ = [
    "SERVER_POLICIES",
    "MarftAction",
    "MarftEnvClient",
    "MarftEnvironment",
    "MarftObservation",
    "MarftState",
    "create_server_app",
    "serve",
]
