import Posix

/// One field of a CSV record: a range of the file's bytes, still with its doubled quotes when `quoted`.
struct CSVField {
    var start: Int
    var end: Int
    var quoted: Bool
}

/// One record (row) of a CSV file and the line it starts on.
struct CSVRecord {
    var line: Int
    var fields: [CSVField]
}

/// CSV (RFC 4180) read from secret memory with bounds: fields separated by commas, records by CRLF or LF,
/// quoted fields with doubled quotes and line breaks inside, a UTF-8 BOM before the header allowed. A field is
/// a range of the file; its text is taken when it is wanted, a secret into secret memory.
enum CSVReader {
    /// The largest file read.
    static let maxBytes = 64 << 20
    /// The most records (rows, the header among them).
    static let maxRecords = 1_000_000
    /// The most fields in one record.
    static let maxFields = 256

    /// The records of `bytes`; blank lines are skipped.
    static func records(_ bytes: UnsafeRawBufferPointer) throws(ExchangeError) -> [CSVRecord] {
        guard bytes.count <= maxBytes else {
            throw ExchangeError(.tooLarge, "CSV file: larger than \(maxBytes >> 20) MiB")
        }
        var records: [CSVRecord] = []
        var position = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        var line = 1
        let quote = UInt8(ascii: "\"")
        let comma = UInt8(ascii: ",")
        let cr = UInt8(ascii: "\r")
        let lf = UInt8(ascii: "\n")
        while position < bytes.count {
            let recordLine = line
            var fields: [CSVField] = []
            var atRecordEnd = false
            while !atRecordEnd {
                guard fields.count < maxFields else {
                    throw ExchangeError(.tooLarge, "CSV file: more than \(maxFields) fields on line \(recordLine)")
                }
                if position < bytes.count, bytes[position] == quote {
                    let openedOn = line
                    position += 1
                    let start = position
                    while true {
                        guard position < bytes.count else {
                            throw ExchangeError(
                                .malformed, "CSV file: the quoted field opened on line \(openedOn) is not closed")
                        }
                        let byte = bytes[position]
                        if byte == quote {
                            if position + 1 < bytes.count, bytes[position + 1] == quote {
                                position += 2
                                continue
                            }
                            break
                        }
                        if byte == lf { line += 1 }
                        position += 1
                    }
                    fields.append(CSVField(start: start, end: position, quoted: true))
                    position += 1
                } else {
                    let start = position
                    while position < bytes.count, bytes[position] != comma, bytes[position] != lf,
                        bytes[position] != cr
                    {
                        position += 1
                    }
                    fields.append(CSVField(start: start, end: position, quoted: false))
                }
                // After a field: a comma, the end of the record (CRLF, LF) or of the file.
                if position >= bytes.count {
                    atRecordEnd = true
                } else if bytes[position] == comma {
                    position += 1
                } else if bytes[position] == lf {
                    position += 1
                    line += 1
                    atRecordEnd = true
                } else if bytes[position] == cr, position + 1 < bytes.count, bytes[position + 1] == lf {
                    position += 2
                    line += 1
                    atRecordEnd = true
                } else if bytes[position] == cr, position + 1 == bytes.count {
                    position += 1
                    atRecordEnd = true
                } else if bytes[position] == cr {
                    throw ExchangeError(.malformed, "CSV file: a carriage return without a line feed on line \(line)")
                } else {
                    throw ExchangeError(.malformed, "CSV file: text after a closing quote on line \(line)")
                }
            }
            if fields.count == 1, fields[0].start == fields[0].end, !fields[0].quoted { continue }
            records.append(CSVRecord(line: recordLine, fields: fields))
            guard records.count <= maxRecords else {
                throw ExchangeError(.tooLarge, "CSV file: more than \(maxRecords) rows")
            }
        }
        return records
    }

    /// Calls `emit` with each byte of `field`'s value (doubled quotes made single).
    static func unquote(_ field: CSVField, in bytes: UnsafeRawBufferPointer, _ emit: (UInt8) -> Void) {
        var index = field.start
        while index < field.end {
            emit(bytes[index])
            index += field.quoted && bytes[index] == UInt8(ascii: "\"") ? 2 : 1
        }
    }
}
