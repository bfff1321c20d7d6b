"""``grpc.health.v1``: the health service's messages, stub, servicer base and servicer."""
