// The kSec* names of Apple's SecItem.h, spelled with the same string values.
// Each value is the one Apple uses, so dictionaries read the same on both systems.

// MARK: Item class key and values

/// The key whose value is the item class.
public let kSecClass: CFString = "class"
/// Generic password items.
public let kSecClassGenericPassword: CFString = "genp"
/// Internet password items.
public let kSecClassInternetPassword: CFString = "inet"
/// Certificate items.
public let kSecClassCertificate: CFString = "cert"
/// Key items.
public let kSecClassKey: CFString = "keys"
/// Identity items (a certificate with its private key).
public let kSecClassIdentity: CFString = "idnt"

// MARK: Attribute keys

/// When the item's data is accessible (string).
public let kSecAttrAccessible: CFString = "pdmn"
/// Access control conditions (stored as given).
public let kSecAttrAccessControl: CFString = "accc"
/// The item's access group (string).
public let kSecAttrAccessGroup: CFString = "agrp"
/// Whether the item is synchronizable (boolean).
public let kSecAttrSynchronizable: CFString = "sync"
/// The creation date, set by the store (date).
public let kSecAttrCreationDate: CFString = "cdat"
/// The modification date, set by the store (date).
public let kSecAttrModificationDate: CFString = "mdat"
/// A user-visible description of the kind of item (string).
public let kSecAttrDescription: CFString = "desc"
/// A user-editable comment (string).
public let kSecAttrComment: CFString = "icmt"
/// The creator code (number).
public let kSecAttrCreator: CFString = "crtr"
/// The item type code (number).
public let kSecAttrType: CFString = "type"
/// The user-visible label (string).
public let kSecAttrLabel: CFString = "labl"
/// Whether the item is hidden from display (boolean).
public let kSecAttrIsInvisible: CFString = "invi"
/// Whether the item records that no password is stored (boolean).
public let kSecAttrIsNegative: CFString = "nega"
/// The account name (string).
public let kSecAttrAccount: CFString = "acct"
/// The service (string).
public let kSecAttrService: CFString = "svce"
/// User-defined data (data).
public let kSecAttrGeneric: CFString = "gena"
/// The Internet security domain (string).
public let kSecAttrSecurityDomain: CFString = "sdmn"
/// The server's domain name or IP address (string).
public let kSecAttrServer: CFString = "srvr"
/// The protocol, one of the kSecAttrProtocol values (string).
public let kSecAttrProtocol: CFString = "ptcl"
/// The authentication scheme, one of the kSecAttrAuthenticationType values (string).
public let kSecAttrAuthenticationType: CFString = "atyp"
/// The port number (number).
public let kSecAttrPort: CFString = "port"
/// The path, typically of a URL (string).
public let kSecAttrPath: CFString = "path"
/// A certificate's X.500 subject (data).
public let kSecAttrSubject: CFString = "subj"
/// A certificate's X.500 issuer (data).
public let kSecAttrIssuer: CFString = "issr"
/// A certificate's serial number (data).
public let kSecAttrSerialNumber: CFString = "slnr"
/// A certificate's subject key identifier (data).
public let kSecAttrSubjectKeyID: CFString = "skid"
/// The hash of a certificate's public key (data).
public let kSecAttrPublicKeyHash: CFString = "pkhh"
/// The certificate type (number).
public let kSecAttrCertificateType: CFString = "ctyp"
/// The certificate encoding (number).
public let kSecAttrCertificateEncoding: CFString = "cenc"
/// The key class: kSecAttrKeyClassPublic, Private or Symmetric (number).
public let kSecAttrKeyClass: CFString = "kcls"
/// A key's application label (data).
public let kSecAttrApplicationLabel: CFString = "klbl"
/// Whether the key is stored permanently (boolean).
public let kSecAttrIsPermanent: CFString = "perm"
/// A key's private tag (data).
public let kSecAttrApplicationTag: CFString = "atag"
/// The key algorithm, such as kSecAttrKeyTypeRSA (number).
public let kSecAttrKeyType: CFString = "type"
/// The key size in bits (number).
public let kSecAttrKeySizeInBits: CFString = "bsiz"
/// The effective key size in bits (number).
public let kSecAttrEffectiveKeySize: CFString = "esiz"
/// Whether the key can encrypt (boolean).
public let kSecAttrCanEncrypt: CFString = "encr"
/// Whether the key can decrypt (boolean).
public let kSecAttrCanDecrypt: CFString = "decr"
/// Whether the key can derive keys (boolean).
public let kSecAttrCanDerive: CFString = "drve"
/// Whether the key can sign (boolean).
public let kSecAttrCanSign: CFString = "sign"
/// Whether the key can verify signatures (boolean).
public let kSecAttrCanVerify: CFString = "vrfy"
/// Whether the key can wrap keys (boolean).
public let kSecAttrCanWrap: CFString = "wrap"
/// Whether the key can unwrap keys (boolean).
public let kSecAttrCanUnwrap: CFString = "unwp"
/// A sync view hint (not supported: errSecNoSuchAttr).
public let kSecAttrSyncViewHint: CFString = "vwht"
/// A token identifier (not supported: errSecNoSuchAttr).
public let kSecAttrTokenID: CFString = "tkid"

// MARK: kSecAttrAccessible values

/// Accessible while the keychain is unlocked.
public let kSecAttrAccessibleWhenUnlocked: CFString = "ak"
/// Accessible after the first unlock.
public let kSecAttrAccessibleAfterFirstUnlock: CFString = "ck"
/// Always accessible.
public let kSecAttrAccessibleAlways: CFString = "dk"
/// Accessible while unlocked, only with a passcode, never migrated.
public let kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly: CFString = "akpu"
/// Accessible while unlocked, never migrated.
public let kSecAttrAccessibleWhenUnlockedThisDeviceOnly: CFString = "aku"
/// Accessible after the first unlock, never migrated.
public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = "cku"
/// Always accessible, never migrated.
public let kSecAttrAccessibleAlwaysThisDeviceOnly: CFString = "dku"

// MARK: kSecAttrProtocol values

/// The four-character code `ftp `.
public let kSecAttrProtocolFTP: CFString = "ftp "
/// The four-character code `ftpa`.
public let kSecAttrProtocolFTPAccount: CFString = "ftpa"
/// The four-character code `http`.
public let kSecAttrProtocolHTTP: CFString = "http"
/// The four-character code `irc `.
public let kSecAttrProtocolIRC: CFString = "irc "
/// The four-character code `nntp`.
public let kSecAttrProtocolNNTP: CFString = "nntp"
/// The four-character code `pop3`.
public let kSecAttrProtocolPOP3: CFString = "pop3"
/// The four-character code `smtp`.
public let kSecAttrProtocolSMTP: CFString = "smtp"
/// The four-character code `sox `.
public let kSecAttrProtocolSOCKS: CFString = "sox "
/// The four-character code `imap`.
public let kSecAttrProtocolIMAP: CFString = "imap"
/// The four-character code `ldap`.
public let kSecAttrProtocolLDAP: CFString = "ldap"
/// The four-character code `atlk`.
public let kSecAttrProtocolAppleTalk: CFString = "atlk"
/// The four-character code `afp `.
public let kSecAttrProtocolAFP: CFString = "afp "
/// The four-character code `teln`.
public let kSecAttrProtocolTelnet: CFString = "teln"
/// The four-character code `ssh `.
public let kSecAttrProtocolSSH: CFString = "ssh "
/// The four-character code `ftps`.
public let kSecAttrProtocolFTPS: CFString = "ftps"
/// The four-character code `htps`.
public let kSecAttrProtocolHTTPS: CFString = "htps"
/// The four-character code `htpx`.
public let kSecAttrProtocolHTTPProxy: CFString = "htpx"
/// The four-character code `htsx`.
public let kSecAttrProtocolHTTPSProxy: CFString = "htsx"
/// The four-character code `ftpx`.
public let kSecAttrProtocolFTPProxy: CFString = "ftpx"
/// The four-character code `smb `.
public let kSecAttrProtocolSMB: CFString = "smb "
/// The four-character code `rtsp`.
public let kSecAttrProtocolRTSP: CFString = "rtsp"
/// The four-character code `rtsx`.
public let kSecAttrProtocolRTSPProxy: CFString = "rtsx"
/// The four-character code `daap`.
public let kSecAttrProtocolDAAP: CFString = "daap"
/// The four-character code `eppc`.
public let kSecAttrProtocolEPPC: CFString = "eppc"
/// The four-character code `ipp `.
public let kSecAttrProtocolIPP: CFString = "ipp "
/// The four-character code `ntps`.
public let kSecAttrProtocolNNTPS: CFString = "ntps"
/// The four-character code `ldps`.
public let kSecAttrProtocolLDAPS: CFString = "ldps"
/// The four-character code `tels`.
public let kSecAttrProtocolTelnetS: CFString = "tels"
/// The four-character code `imps`.
public let kSecAttrProtocolIMAPS: CFString = "imps"
/// The four-character code `ircs`.
public let kSecAttrProtocolIRCS: CFString = "ircs"
/// The four-character code `pops`.
public let kSecAttrProtocolPOP3S: CFString = "pops"

// MARK: kSecAttrAuthenticationType values

/// The four-character code `ntlm`.
public let kSecAttrAuthenticationTypeNTLM: CFString = "ntlm"
/// The four-character code `msna`.
public let kSecAttrAuthenticationTypeMSN: CFString = "msna"
/// The four-character code `dpaa`.
public let kSecAttrAuthenticationTypeDPA: CFString = "dpaa"
/// The four-character code `rpaa`.
public let kSecAttrAuthenticationTypeRPA: CFString = "rpaa"
/// The four-character code `http`.
public let kSecAttrAuthenticationTypeHTTPBasic: CFString = "http"
/// The four-character code `httd`.
public let kSecAttrAuthenticationTypeHTTPDigest: CFString = "httd"
/// The four-character code `form`.
public let kSecAttrAuthenticationTypeHTMLForm: CFString = "form"
/// The four-character code `dflt`.
public let kSecAttrAuthenticationTypeDefault: CFString = "dflt"

// MARK: kSecAttrKeyClass and kSecAttrKeyType values

/// A public key.
public let kSecAttrKeyClassPublic: CFString = "0"
/// A private key.
public let kSecAttrKeyClassPrivate: CFString = "1"
/// A symmetric key.
public let kSecAttrKeyClassSymmetric: CFString = "2"
/// RSA.
public let kSecAttrKeyTypeRSA: CFString = "42"
/// Elliptic curve.
public let kSecAttrKeyTypeEC: CFString = "73"
/// Elliptic curve over a prime field.
public let kSecAttrKeyTypeECSECPrimeRandom: CFString = "73"

// MARK: kSecAttrSynchronizable values

/// Matches synchronizable and non-synchronizable items alike.
public let kSecAttrSynchronizableAny: CFString = "syna"

// MARK: Search keys and values

/// Certificate policy (not supported: errSecUnimplemented).
public let kSecMatchPolicy: CFString = "m_Policy"
/// Limits the search to these items (references or persistent references).
public let kSecMatchItemList: CFString = "m_ItemList"
/// The keychains to search (an array of SecKeychain).
public let kSecMatchSearchList: CFString = "m_SearchList"
/// Certificate issuers (not supported: errSecUnimplemented).
public let kSecMatchIssuers: CFString = "m_Issuers"
/// Certificate e-mail (not supported: errSecUnimplemented).
public let kSecMatchEmailAddressIfPresent: CFString = "m_EmailAddressIfPresent"
/// Certificate subject (not supported: errSecUnimplemented).
public let kSecMatchSubjectContains: CFString = "m_SubjectContains"
/// Whether string attributes compare ignoring case (boolean).
public let kSecMatchCaseInsensitive: CFString = "m_CaseInsensitive"
/// Trusted certificates only (not supported: errSecUnimplemented).
public let kSecMatchTrustedOnly: CFString = "m_TrustedOnly"
/// Validity date (not supported: errSecUnimplemented).
public let kSecMatchValidOnDate: CFString = "m_ValidOnDate"
/// How many matches to return: kSecMatchLimitOne, kSecMatchLimitAll or a number.
public let kSecMatchLimit: CFString = "m_Limit"
/// Return the first match only (the default).
public let kSecMatchLimitOne: CFString = "m_LimitOne"
/// Return every match.
public let kSecMatchLimitAll: CFString = "m_LimitAll"

// MARK: Return type keys

/// Return the item's data (boolean).
public let kSecReturnData: CFString = "r_Data"
/// Return the item's attributes (boolean).
public let kSecReturnAttributes: CFString = "r_Attributes"
/// Return a reference to the item (boolean).
public let kSecReturnRef: CFString = "r_Ref"
/// Return a persistent reference to the item (boolean).
public let kSecReturnPersistentRef: CFString = "r_PersistentRef"

// MARK: Value keys

/// The item's data (secret).
public let kSecValueData: CFString = "v_Data"
/// A reference to the item.
public let kSecValueRef: CFString = "v_Ref"
/// A persistent reference to the item (data).
public let kSecValuePersistentRef: CFString = "v_PersistentRef"

// MARK: Other keys and values

/// The set of items to search (as kSecMatchItemList).
public let kSecUseItemList: CFString = "u_ItemList"
/// The keychain to add the item to (a SecKeychain).
public let kSecUseKeychain: CFString = "u_Keychain"
/// Text shown when authentication is needed (accepted).
public let kSecUseOperationPrompt: CFString = "u_OpPrompt"
/// Fail rather than prompt (boolean).
public let kSecUseNoAuthenticationUI: CFString = "u_NoAuthUI"
/// Whether a prompt may appear: Allow, Fail or Skip.
public let kSecUseAuthenticationUI: CFString = "u_AuthUI"
/// An authentication context (accepted and ignored).
public let kSecUseAuthenticationContext: CFString = "u_AuthCtx"
/// Use the data protection keychain (accepted; Latchkey has one kind).
public let kSecUseDataProtectionKeychain: CFString = "nleg"
/// A prompt may appear.
public let kSecUseAuthenticationUIAllow: CFString = "u_AuthUIA"
/// Fail with errSecInteractionNotAllowed rather than prompt.
public let kSecUseAuthenticationUIFail: CFString = "u_AuthUIF"
/// Leave out items that would need a prompt.
public let kSecUseAuthenticationUISkip: CFString = "u_AuthUIS"
/// The Secure Enclave token (not available on Linux).
public let kSecAttrTokenIDSecureEnclave: CFString = "com.apple.setoken"
