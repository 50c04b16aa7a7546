"""The network under the fabric: RoCEv2/MTU readiness, RoCE arithmetic, line efficiency (G2's stress test)."""
