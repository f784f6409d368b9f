"""fence.proxy.async: ordering the generic and async proxies.

Importing this package registers the ops (`definition`) and their lowering rules."""

from shared_codegen.ops.fence import definition  # noqa: F401
