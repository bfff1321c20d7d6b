"""``grpc.reflection.v1alpha``: the reflection service's messages, stub, servicer base and
servicer."""
