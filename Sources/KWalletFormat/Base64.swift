import COpenSSL
import Posix

/// Base64 (RFC 4648, with padding, no line breaks) into secure memory, through OpenSSL's block coder: a
/// stream entry's bytes are kept in this form, as QtKeychain's libsecret backend keeps them.
enum Base64 {
    /// The base64 text of `bytes`.
    static func encode(_ bytes: UnsafeRawBufferPointer) throws(KWalletFormatError) -> SecretBytes {
        guard bytes.count < Int(Int32.max) / 4 * 3 - 3 else { throw .tooLarge("stream") }
        var text: SecretBytes
        do {
            text = try SecretBytes(zeros: (bytes.count + 2) / 3 * 4 + 1)
        } catch {
            throw KWalletFormatError.outOfMemory
        }
        let written = text.withUnsafeMutableBytes { output in
            EVP_EncodeBlock(
                output.baseAddress?.assumingMemoryBound(to: UInt8.self),
                bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(bytes.count))
        }
        text.truncate(to: Int(written))
        return text
    }

    /// The bytes of base64 `text`; anything that is not base64 throws `badText`.
    static func decode(_ text: UnsafeRawBufferPointer) throws(KWalletFormatError) -> SecretBytes {
        guard text.count % 4 == 0, text.count < Int(Int32.max) else { throw .badText("base64 stream") }
        var bytes: SecretBytes
        do { bytes = try SecretBytes(zeros: text.count / 4 * 3 + 1) } catch { throw .outOfMemory }
        guard !text.isEmpty else {
            bytes.truncate(to: 0)
            return bytes
        }
        let written = bytes.withUnsafeMutableBytes { output in
            EVP_DecodeBlock(
                output.baseAddress?.assumingMemoryBound(to: UInt8.self),
                text.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(text.count))
        }
        guard written >= 0 else {
            bytes.truncate(to: 0)
            throw .badText("base64 stream")
        }
        // EVP_DecodeBlock counts the padding as zero bytes: drop one per `=`.
        let padding = text.reversed().prefix(2).prefix { $0 == UInt8(ascii: "=") }.count
        bytes.truncate(to: Int(written) - padding)
        return bytes
    }
}
