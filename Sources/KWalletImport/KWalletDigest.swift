import COpenSSL

/// The digests an import names files and checks the name index with: SHA-256 (records) and MD5 (kwalletd's index).
enum KWalletDigest {
    /// SHA-256 of `bytes` in lower-case hex.
    static func sha256Hex(_ bytes: [UInt8]) -> String {
        digest(bytes, EVP_sha256(), length: 32).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }

    /// MD5 of the UTF-8 of `name` (a folder or key name in the clear index).
    static func md5(_ name: String) -> [UInt8] {
        digest(Array(name.utf8), EVP_md5(), length: 16)
    }

    private static func digest(_ data: [UInt8], _ type: OpaquePointer?, length: Int) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: length)
        var written: UInt32 = 0
        let ok = data.withUnsafeBytes { input in
            output.withUnsafeMutableBufferPointer { out in
                EVP_Digest(input.baseAddress, input.count, out.baseAddress, &written, type, nil) == 1
            }
        }
        return ok && Int(written) == length ? output : []
    }
}
