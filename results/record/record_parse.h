// Parsing record files in a helper process, so that a file the HDF5 library cannot survive
// (a flipped bit in a global-heap object's size makes it copy past its buffer) takes down
// the helper and leaves the reader with one damaged record, not a crash. sweep's commands
// turn it on (isolate_record_parsing); read_record and read_record_unverified then parse
// through parse_record_isolated (set_record_parse_hook, record.h).
#pragma once

#include <string>

namespace sweep {

struct Record;  // record.h

/// How long one record may take to parse before its helper is killed and the record is
/// called damaged (a flipped bit can send HDF5 round a loop of its global heap for ever):
/// kRecordParseBaseS plus a second for every kRecordParseBytesPerS of the file. Far above
/// what any record takes (a record of 10^6 steps, ~100 MB, parses in about a second; this
/// gives it 50 s), far below forever.
inline constexpr double kRecordParseBaseS = 30;
inline constexpr double kRecordParseBytesPerS = 5e6;

/// Sets the base of that limit (kRecordParseBaseS when never called): for a test that
/// waits for it on purpose.
void set_record_parse_base_s(double seconds);

/// The memory (RLIMIT_DATA) the helper may take: far above what a record sweep writes
/// decodes to (10^6 steps of a run take about 100 MB), far below what a hostile file can
/// ask of HDF5.
inline constexpr unsigned long kRecordParseMemory = 2UL << 30;

/// With `on`, this process parses record files in the helper process; off by default (a
/// training program reads its own files in process).
void isolate_record_parsing(bool on);

/// The record at `path` as `parse` returns it, parsed in the helper process: a fork of
/// this process made at the first call (and again after a helper died), which runs `parse`
/// for each path it is sent and sends the record back encoded (encode_record). What
/// `parse` throws comes back as a RecordError with its message; a helper that dies or takes
/// longer than that limit makes a RecordError naming the file damaged. Calls from
/// several threads take turns.
Record parse_record_isolated(const std::string& path, Record (*parse)(const std::string&));

}  // namespace sweep
