"""Tests of minigrpc.aio: grpcio's asyncio client API on minigrpc's sans-IO core."""
