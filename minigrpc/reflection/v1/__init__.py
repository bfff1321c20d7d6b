"""``grpc.reflection.v1``: the reflection service's messages, stub, servicer base and
servicer."""
