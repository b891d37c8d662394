// The kSec* names of Apple's SecItem.h, spelled with the same string values.
// Each value is the one Apple uses, so dictionaries read the same on both systems.
// They are CFStrings (NSString objects), as on Apple systems: `kSecClass as String`
// bridges, and a value such as `kSecClassGenericPassword` is an `AnyObject`.
// `nonisolated(unsafe)`: an NSString made from a literal is immutable, so
// sharing it between threads is safe, though swift-corelibs-foundation does
// not mark NSString `Sendable`.

// MARK: Item class key and values

/// The key whose value is the item class.
nonisolated(unsafe) public let kSecClass: CFString = "class"
/// Generic password items.
nonisolated(unsafe) public let kSecClassGenericPassword: CFString = "genp"
/// Internet password items.
nonisolated(unsafe) public let kSecClassInternetPassword: CFString = "inet"
/// Certificate items.
nonisolated(unsafe) public let kSecClassCertificate: CFString = "cert"
/// Key items.
nonisolated(unsafe) public let kSecClassKey: CFString = "keys"
/// Identity items (a certificate with its private key).
nonisolated(unsafe) public let kSecClassIdentity: CFString = "idnt"

// MARK: Attribute keys

/// When the item's data is accessible (string).
nonisolated(unsafe) public let kSecAttrAccessible: CFString = "pdmn"
/// Access control conditions (stored as given).
nonisolated(unsafe) public let kSecAttrAccessControl: CFString = "accc"
/// The item's access group (string).
nonisolated(unsafe) public let kSecAttrAccessGroup: CFString = "agrp"
/// Whether the item is synchronizable (boolean).
nonisolated(unsafe) public let kSecAttrSynchronizable: CFString = "sync"
/// The creation date, set by the store (date).
nonisolated(unsafe) public let kSecAttrCreationDate: CFString = "cdat"
/// The modification date, set by the store (date).
nonisolated(unsafe) public let kSecAttrModificationDate: CFString = "mdat"
/// A user-visible description of the kind of item (string).
nonisolated(unsafe) public let kSecAttrDescription: CFString = "desc"
/// A user-editable comment (string).
nonisolated(unsafe) public let kSecAttrComment: CFString = "icmt"
/// The creator code (number).
nonisolated(unsafe) public let kSecAttrCreator: CFString = "crtr"
/// The item type code (number).
nonisolated(unsafe) public let kSecAttrType: CFString = "type"
/// The user-visible label (string).
nonisolated(unsafe) public let kSecAttrLabel: CFString = "labl"
/// Whether the item is hidden from display (boolean).
nonisolated(unsafe) public let kSecAttrIsInvisible: CFString = "invi"
/// Whether the item records that no password is stored (boolean).
nonisolated(unsafe) public let kSecAttrIsNegative: CFString = "nega"
/// The account name (string).
nonisolated(unsafe) public let kSecAttrAccount: CFString = "acct"
/// The service (string).
nonisolated(unsafe) public let kSecAttrService: CFString = "svce"
/// User-defined data (data).
nonisolated(unsafe) public let kSecAttrGeneric: CFString = "gena"
/// The Internet security domain (string).
nonisolated(unsafe) public let kSecAttrSecurityDomain: CFString = "sdmn"
/// The server's domain name or IP address (string).
nonisolated(unsafe) public let kSecAttrServer: CFString = "srvr"
/// The protocol, one of the kSecAttrProtocol values (string).
nonisolated(unsafe) public let kSecAttrProtocol: CFString = "ptcl"
/// The authentication scheme, one of the kSecAttrAuthenticationType values (string).
nonisolated(unsafe) public let kSecAttrAuthenticationType: CFString = "atyp"
/// The port number (number).
nonisolated(unsafe) public let kSecAttrPort: CFString = "port"
/// The path, typically of a URL (string).
nonisolated(unsafe) public let kSecAttrPath: CFString = "path"
/// A certificate's X.500 subject (data).
nonisolated(unsafe) public let kSecAttrSubject: CFString = "subj"
/// A certificate's X.500 issuer (data).
nonisolated(unsafe) public let kSecAttrIssuer: CFString = "issr"
/// A certificate's serial number (data).
nonisolated(unsafe) public let kSecAttrSerialNumber: CFString = "slnr"
/// A certificate's subject key identifier (data).
nonisolated(unsafe) public let kSecAttrSubjectKeyID: CFString = "skid"
/// The hash of a certificate's public key (data).
nonisolated(unsafe) public let kSecAttrPublicKeyHash: CFString = "pkhh"
/// The certificate type (number).
nonisolated(unsafe) public let kSecAttrCertificateType: CFString = "ctyp"
/// The certificate encoding (number).
nonisolated(unsafe) public let kSecAttrCertificateEncoding: CFString = "cenc"
/// The key class: kSecAttrKeyClassPublic, Private or Symmetric (number).
nonisolated(unsafe) public let kSecAttrKeyClass: CFString = "kcls"
/// A key's application label (data).
nonisolated(unsafe) public let kSecAttrApplicationLabel: CFString = "klbl"
/// Whether the key is stored permanently (boolean).
nonisolated(unsafe) public let kSecAttrIsPermanent: CFString = "perm"
/// A key's private tag (data).
nonisolated(unsafe) public let kSecAttrApplicationTag: CFString = "atag"
/// The key algorithm, such as kSecAttrKeyTypeRSA (number).
nonisolated(unsafe) public let kSecAttrKeyType: CFString = "type"
/// The key size in bits (number).
nonisolated(unsafe) public let kSecAttrKeySizeInBits: CFString = "bsiz"
/// The effective key size in bits (number).
nonisolated(unsafe) public let kSecAttrEffectiveKeySize: CFString = "esiz"
/// Whether the key can encrypt (boolean).
nonisolated(unsafe) public let kSecAttrCanEncrypt: CFString = "encr"
/// Whether the key can decrypt (boolean).
nonisolated(unsafe) public let kSecAttrCanDecrypt: CFString = "decr"
/// Whether the key can derive keys (boolean).
nonisolated(unsafe) public let kSecAttrCanDerive: CFString = "drve"
/// Whether the key can sign (boolean).
nonisolated(unsafe) public let kSecAttrCanSign: CFString = "sign"
/// Whether the key can verify signatures (boolean).
nonisolated(unsafe) public let kSecAttrCanVerify: CFString = "vrfy"
/// Whether the key can wrap keys (boolean).
nonisolated(unsafe) public let kSecAttrCanWrap: CFString = "wrap"
/// Whether the key can unwrap keys (boolean).
nonisolated(unsafe) public let kSecAttrCanUnwrap: CFString = "unwp"
/// A sync view hint (not supported: errSecNoSuchAttr).
nonisolated(unsafe) public let kSecAttrSyncViewHint: CFString = "vwht"
/// A token identifier (not supported: errSecNoSuchAttr).
nonisolated(unsafe) public let kSecAttrTokenID: CFString = "tkid"

// MARK: kSecAttrAccessible values

/// Accessible while the keychain is unlocked.
nonisolated(unsafe) public let kSecAttrAccessibleWhenUnlocked: CFString = "ak"
/// Accessible after the first unlock.
nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlock: CFString = "ck"
/// Always accessible.
nonisolated(unsafe) public let kSecAttrAccessibleAlways: CFString = "dk"
/// Accessible while unlocked, only with a passcode, never migrated.
nonisolated(unsafe) public let kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly: CFString = "akpu"
/// Accessible while unlocked, never migrated.
nonisolated(unsafe) public let kSecAttrAccessibleWhenUnlockedThisDeviceOnly: CFString = "aku"
/// Accessible after the first unlock, never migrated.
nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = "cku"
/// Always accessible, never migrated.
nonisolated(unsafe) public let kSecAttrAccessibleAlwaysThisDeviceOnly: CFString = "dku"

// MARK: kSecAttrProtocol values

/// The four-character code `ftp `.
nonisolated(unsafe) public let kSecAttrProtocolFTP: CFString = "ftp "
/// The four-character code `ftpa`.
nonisolated(unsafe) public let kSecAttrProtocolFTPAccount: CFString = "ftpa"
/// The four-character code `http`.
nonisolated(unsafe) public let kSecAttrProtocolHTTP: CFString = "http"
/// The four-character code `irc `.
nonisolated(unsafe) public let kSecAttrProtocolIRC: CFString = "irc "
/// The four-character code `nntp`.
nonisolated(unsafe) public let kSecAttrProtocolNNTP: CFString = "nntp"
/// The four-character code `pop3`.
nonisolated(unsafe) public let kSecAttrProtocolPOP3: CFString = "pop3"
/// The four-character code `smtp`.
nonisolated(unsafe) public let kSecAttrProtocolSMTP: CFString = "smtp"
/// The four-character code `sox `.
nonisolated(unsafe) public let kSecAttrProtocolSOCKS: CFString = "sox "
/// The four-character code `imap`.
nonisolated(unsafe) public let kSecAttrProtocolIMAP: CFString = "imap"
/// The four-character code `ldap`.
nonisolated(unsafe) public let kSecAttrProtocolLDAP: CFString = "ldap"
/// The four-character code `atlk`.
nonisolated(unsafe) public let kSecAttrProtocolAppleTalk: CFString = "atlk"
/// The four-character code `afp `.
nonisolated(unsafe) public let kSecAttrProtocolAFP: CFString = "afp "
/// The four-character code `teln`.
nonisolated(unsafe) public let kSecAttrProtocolTelnet: CFString = "teln"
/// The four-character code `ssh `.
nonisolated(unsafe) public let kSecAttrProtocolSSH: CFString = "ssh "
/// The four-character code `ftps`.
nonisolated(unsafe) public let kSecAttrProtocolFTPS: CFString = "ftps"
/// The four-character code `htps`.
nonisolated(unsafe) public let kSecAttrProtocolHTTPS: CFString = "htps"
/// The four-character code `htpx`.
nonisolated(unsafe) public let kSecAttrProtocolHTTPProxy: CFString = "htpx"
/// The four-character code `htsx`.
nonisolated(unsafe) public let kSecAttrProtocolHTTPSProxy: CFString = "htsx"
/// The four-character code `ftpx`.
nonisolated(unsafe) public let kSecAttrProtocolFTPProxy: CFString = "ftpx"
/// The four-character code `smb `.
nonisolated(unsafe) public let kSecAttrProtocolSMB: CFString = "smb "
/// The four-character code `rtsp`.
nonisolated(unsafe) public let kSecAttrProtocolRTSP: CFString = "rtsp"
/// The four-character code `rtsx`.
nonisolated(unsafe) public let kSecAttrProtocolRTSPProxy: CFString = "rtsx"
/// The four-character code `daap`.
nonisolated(unsafe) public let kSecAttrProtocolDAAP: CFString = "daap"
/// The four-character code `eppc`.
nonisolated(unsafe) public let kSecAttrProtocolEPPC: CFString = "eppc"
/// The four-character code `ipp `.
nonisolated(unsafe) public let kSecAttrProtocolIPP: CFString = "ipp "
/// The four-character code `ntps`.
nonisolated(unsafe) public let kSecAttrProtocolNNTPS: CFString = "ntps"
/// The four-character code `ldps`.
nonisolated(unsafe) public let kSecAttrProtocolLDAPS: CFString = "ldps"
/// The four-character code `tels`.
nonisolated(unsafe) public let kSecAttrProtocolTelnetS: CFString = "tels"
/// The four-character code `imps`.
nonisolated(unsafe) public let kSecAttrProtocolIMAPS: CFString = "imps"
/// The four-character code `ircs`.
nonisolated(unsafe) public let kSecAttrProtocolIRCS: CFString = "ircs"
/// The four-character code `pops`.
nonisolated(unsafe) public let kSecAttrProtocolPOP3S: CFString = "pops"

// MARK: kSecAttrAuthenticationType values

/// The four-character code `ntlm`.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeNTLM: CFString = "ntlm"
/// The four-character code `msna`.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeMSN: CFString = "msna"
/// The four-character code `dpaa`.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeDPA: CFString = "dpaa"
/// The four-character code `rpaa`.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeRPA: CFString = "rpaa"
/// The four-character code `http`.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeHTTPBasic: CFString = "http"
/// The four-character code `httd`.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeHTTPDigest: CFString = "httd"
/// The four-character code `form`.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeHTMLForm: CFString = "form"
/// The four-character code `dflt`.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeDefault: CFString = "dflt"

// MARK: kSecAttrKeyClass and kSecAttrKeyType values

/// A public key.
nonisolated(unsafe) public let kSecAttrKeyClassPublic: CFString = "0"
/// A private key.
nonisolated(unsafe) public let kSecAttrKeyClassPrivate: CFString = "1"
/// A symmetric key.
nonisolated(unsafe) public let kSecAttrKeyClassSymmetric: CFString = "2"
/// RSA.
nonisolated(unsafe) public let kSecAttrKeyTypeRSA: CFString = "42"
/// Elliptic curve.
nonisolated(unsafe) public let kSecAttrKeyTypeEC: CFString = "73"
/// Elliptic curve over a prime field.
nonisolated(unsafe) public let kSecAttrKeyTypeECSECPrimeRandom: CFString = "73"

// MARK: kSecAttrSynchronizable values

/// Matches synchronizable and non-synchronizable items alike.
nonisolated(unsafe) public let kSecAttrSynchronizableAny: CFString = "syna"

// MARK: Search keys and values

/// Certificate policy (not supported: errSecUnimplemented).
nonisolated(unsafe) public let kSecMatchPolicy: CFString = "m_Policy"
/// Limits the search to these items (references or persistent references).
nonisolated(unsafe) public let kSecMatchItemList: CFString = "m_ItemList"
/// The keychains to search (an array of SecKeychain).
nonisolated(unsafe) public let kSecMatchSearchList: CFString = "m_SearchList"
/// Certificate issuers (not supported: errSecUnimplemented).
nonisolated(unsafe) public let kSecMatchIssuers: CFString = "m_Issuers"
/// Certificate e-mail (not supported: errSecUnimplemented).
nonisolated(unsafe) public let kSecMatchEmailAddressIfPresent: CFString = "m_EmailAddressIfPresent"
/// Certificate subject (not supported: errSecUnimplemented).
nonisolated(unsafe) public let kSecMatchSubjectContains: CFString = "m_SubjectContains"
/// Whether string attributes compare ignoring case (boolean).
nonisolated(unsafe) public let kSecMatchCaseInsensitive: CFString = "m_CaseInsensitive"
/// Trusted certificates only (not supported: errSecUnimplemented).
nonisolated(unsafe) public let kSecMatchTrustedOnly: CFString = "m_TrustedOnly"
/// Validity date (not supported: errSecUnimplemented).
nonisolated(unsafe) public let kSecMatchValidOnDate: CFString = "m_ValidOnDate"
/// How many matches to return: kSecMatchLimitOne, kSecMatchLimitAll or a number.
nonisolated(unsafe) public let kSecMatchLimit: CFString = "m_Limit"
/// Return the first match only (the default).
nonisolated(unsafe) public let kSecMatchLimitOne: CFString = "m_LimitOne"
/// Return every match.
nonisolated(unsafe) public let kSecMatchLimitAll: CFString = "m_LimitAll"

// MARK: Return type keys

/// Return the item's data (boolean).
nonisolated(unsafe) public let kSecReturnData: CFString = "r_Data"
/// Return the item's attributes (boolean).
nonisolated(unsafe) public let kSecReturnAttributes: CFString = "r_Attributes"
/// Return a reference to the item (boolean).
nonisolated(unsafe) public let kSecReturnRef: CFString = "r_Ref"
/// Return a persistent reference to the item (boolean).
nonisolated(unsafe) public let kSecReturnPersistentRef: CFString = "r_PersistentRef"

// MARK: Value keys

/// The item's data (secret).
nonisolated(unsafe) public let kSecValueData: CFString = "v_Data"
/// A reference to the item.
nonisolated(unsafe) public let kSecValueRef: CFString = "v_Ref"
/// A persistent reference to the item (data).
nonisolated(unsafe) public let kSecValuePersistentRef: CFString = "v_PersistentRef"

// MARK: Other keys and values

/// The set of items to search (as kSecMatchItemList).
nonisolated(unsafe) public let kSecUseItemList: CFString = "u_ItemList"
/// The keychain to add the item to (a SecKeychain).
nonisolated(unsafe) public let kSecUseKeychain: CFString = "u_Keychain"
/// Text shown when authentication is needed (accepted).
nonisolated(unsafe) public let kSecUseOperationPrompt: CFString = "u_OpPrompt"
/// Fail rather than prompt (boolean).
nonisolated(unsafe) public let kSecUseNoAuthenticationUI: CFString = "u_NoAuthUI"
/// Whether a prompt may appear: Allow, Fail or Skip.
nonisolated(unsafe) public let kSecUseAuthenticationUI: CFString = "u_AuthUI"
/// An authentication context (accepted and ignored).
nonisolated(unsafe) public let kSecUseAuthenticationContext: CFString = "u_AuthCtx"
/// Use the data protection keychain (accepted; Latchkey has one kind).
nonisolated(unsafe) public let kSecUseDataProtectionKeychain: CFString = "nleg"
/// A prompt may appear.
nonisolated(unsafe) public let kSecUseAuthenticationUIAllow: CFString = "u_AuthUIA"
/// Fail with errSecInteractionNotAllowed rather than prompt.
nonisolated(unsafe) public let kSecUseAuthenticationUIFail: CFString = "u_AuthUIF"
/// Leave out items that would need a prompt.
nonisolated(unsafe) public let kSecUseAuthenticationUISkip: CFString = "u_AuthUIS"
/// The Secure Enclave token (not available on Linux).
nonisolated(unsafe) public let kSecAttrTokenIDSecureEnclave: CFString = "com.apple.setoken"
