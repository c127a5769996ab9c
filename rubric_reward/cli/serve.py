"""Command line for the reward service: ``rubric-reward serve --config reward.yaml [--host H] [--port P]``.

``register(subparsers)`` adds it to the ``rubric-reward`` parser. The service
prints ``listening on http://HOST:PORT`` once it accepts requests (``--port 0`` picks a free port)
and exits 0 after a graceful SIGTERM / Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

__all__ = ["register"]


def _cmd_serve(args: argparse.Namespace) -> int:
    from ..serve.app import serve
    from ..serve.config import ServeConfig

    logging.basicConfig(level=getattr(logging, args.log_level.upper()), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = ServeConfig.from_yaml(args.config) if args.config else ServeConfig()
    host = args.host or config.serve.host

    def ready(port: int) -> None:
        print(f"rubric-reward serve: listening on http://{host}:{port}", flush=True)

    try:
        asyncio.run(serve(config, host=host, port=args.port, on_ready=ready, access_log=not args.no_access_log))
    except OSError as exc:  # the port is taken, the address is not local, ...
        print(f"error: cannot listen on {host}:{config.serve.port if args.port is None else args.port}: {exc}",
              file=sys.stderr)
        return 2
    print("rubric-reward serve: stopped", flush=True)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Register ``serve`` on an argparse subparsers object."""
    p = sub.add_parser("serve", help="serve rewards over HTTP (/score, OpenRLHF's remote reward, /metrics)")
    p.add_argument("--config", help="reward.yaml (judge, rubric, rubric_dir, scoring, limits, auth)")
    p.add_argument("--host", help="address to listen on (default: serve.host, 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default: serve.port, 8000; 0 picks a free one)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                   help="logging level of the service (default info)")
    p.add_argument("--no-access-log", action="store_true", help="do not log each request")
    p.set_defaults(func=_cmd_serve)
