"""What a request may be, shared by the service and the client so both refuse the same bodies: the
request and response models (schemas.py) and the body decoders (codecs.py). No web framework: the service
encodes its answers in featurehash.service.api.responses."""
