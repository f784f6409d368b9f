"""fence.proxy.async: ordering the generic and async proxies.

Importing this package registers the op (`definition`) and its lowering rule."""

from shared_codegen.ops.fence import definition, lowering  # noqa: F401
