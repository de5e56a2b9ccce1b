"""Generated gRPC and protobuf code (see proto/generate.py). DO NOT EDIT."""
