#!/usr/bin/python3
"""Decodes a TensorBoard event file without Parasync's code or .proto.

A second, independent reading of what the chief writes: the TFRecord framing
and masked CRC-32C as TensorFlow's record_reader checks them (CRCs from
Debian's python3-crcmod), and the Event / Summary / HistogramProto fields by
the numbers in TensorFlow's event.proto and summary.proto, parsed from the
protobuf wire format by hand. Prints the events as JSON; exits 1 with the
reason on the first bad record.

Usage: decode_tfevents.py EVENT_FILE
"""
import json
import struct
import sys

import crcmod.predefined

crc32c = crcmod.predefined.mkPredefinedCrcFun("crc-32c")


def masked_crc(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(buf, pos):
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def fields(buf):
    """Yields (field number, wire type, value) of a serialized message."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            length, pos = varint(buf, pos)
            value, pos = buf[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError("unexpected wire type %d" % wire)
        yield number, wire, value


def doubles(value, wire):
    if wire == 1:  # one unpacked double
        return [struct.unpack("<d", value)[0]]
    return list(struct.unpack("<%dd" % (len(value) // 8), value))


def histogram(buf):
    # HistogramProto: min 1, max 2, num 3, sum 4, sum_squares 5,
    # bucket_limit 6 (packed), bucket 7 (packed).
    names = {1: "min", 2: "max", 3: "num", 4: "sum", 5: "sum_squares"}
    out = {"bucket_limit": [], "bucket": []}
    for number, wire, value in fields(buf):
        if number in names:
            out[names[number]] = struct.unpack("<d", value)[0]
        elif number == 6:
            out["bucket_limit"] += doubles(value, wire)
        elif number == 7:
            out["bucket"] += doubles(value, wire)
    return out


def summary(buf):
    # Summary: repeated Value value = 1; Value: tag 1, simple_value 2 (float),
    # histo 5 (HistogramProto).
    scalars, histograms = {}, {}
    for number, _, value in fields(buf):
        if number != 1:
            continue
        tag, simple, histo = None, None, None
        for n, _, v in fields(value):
            if n == 1:
                tag = v.decode("utf-8")
            elif n == 2:
                simple = struct.unpack("<f", v)[0]
            elif n == 5:
                histo = histogram(v)
        if simple is not None:
            scalars[tag] = simple
        if histo is not None:
            histograms[tag] = histo
    return scalars, histograms


def event(buf):
    # Event: wall_time 1 (double), step 2 (int64), file_version 3, summary 5.
    out = {"step": 0}
    for number, _, value in fields(buf):
        if number == 1:
            out["wall_time"] = struct.unpack("<d", value)[0]
        elif number == 2:
            out["step"] = value - (1 << 64) if value >= 1 << 63 else value
        elif number == 3:
            out["file_version"] = value.decode("utf-8")
        elif number == 5:
            out["scalars"], out["histograms"] = summary(value)
    return out


def main(path):
    data = open(path, "rb").read()
    pos, events = 0, []
    while pos < len(data):
        header = data[pos:pos + 12]
        if len(header) < 12:
            sys.exit("%s: truncated record header at byte %d" % (path, pos))
        length = struct.unpack("<Q", header[:8])[0]
        if struct.unpack("<I", header[8:])[0] != masked_crc(header[:8]):
            sys.exit("%s: length CRC mismatch at byte %d" % (path, pos))
        body = data[pos + 12:pos + 12 + length]
        footer = data[pos + 12 + length:pos + 16 + length]
        if len(body) < length or len(footer) < 4:
            sys.exit("%s: truncated record at byte %d" % (path, pos))
        if struct.unpack("<I", footer)[0] != masked_crc(body):
            sys.exit("%s: data CRC mismatch at byte %d" % (path, pos))
        events.append(event(body))
        pos += 16 + length
    json.dump(events, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
