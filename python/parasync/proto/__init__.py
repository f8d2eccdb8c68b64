"""The protocol modules, generated at build time from core/proto/parasync.proto."""
