import FoundationEssentials
import KeychainCore
import KeychainStore
import Posix

/// Password exports in CSV (RFC 4180) from the programs people use, told apart by their header row.
package enum PasswordCSV {
    /// The items of a CSV password export.
    package static func decode(_ file: borrowing SecretBytes) throws(ExchangeError) -> ExchangeReading {
        throw ExchangeError(.unknownFormat, "CSV file: not a password export this version reads")
    }
}
