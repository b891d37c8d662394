import DBus

/// Introspection data. `interfaces` is also written to
/// `dbus/org.freedesktop.Secrets.xml` (`latchkeyd --print-introspection`); a test
/// keeps the two equal.
public enum Introspection {
    static let header = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">

        """

    static let service = """
          <interface name="org.freedesktop.Secret.Service">
            <method name="OpenSession">
              <arg name="algorithm" type="s" direction="in"/>
              <arg name="input" type="v" direction="in"/>
              <arg name="output" type="v" direction="out"/>
              <arg name="result" type="o" direction="out"/>
            </method>
            <method name="CreateCollection">
              <arg name="properties" type="a{sv}" direction="in"/>
              <arg name="alias" type="s" direction="in"/>
              <arg name="collection" type="o" direction="out"/>
              <arg name="prompt" type="o" direction="out"/>
            </method>
            <method name="SearchItems">
              <arg name="attributes" type="a{ss}" direction="in"/>
              <arg name="unlocked" type="ao" direction="out"/>
              <arg name="locked" type="ao" direction="out"/>
            </method>
            <method name="Unlock">
              <arg name="objects" type="ao" direction="in"/>
              <arg name="unlocked" type="ao" direction="out"/>
              <arg name="prompt" type="o" direction="out"/>
            </method>
            <method name="Lock">
              <arg name="objects" type="ao" direction="in"/>
              <arg name="locked" type="ao" direction="out"/>
              <arg name="Prompt" type="o" direction="out"/>
            </method>
            <method name="GetSecrets">
              <arg name="items" type="ao" direction="in"/>
              <arg name="session" type="o" direction="in"/>
              <arg name="secrets" type="a{o(oayays)}" direction="out"/>
            </method>
            <method name="ReadAlias">
              <arg name="name" type="s" direction="in"/>
              <arg name="collection" type="o" direction="out"/>
            </method>
            <method name="SetAlias">
              <arg name="name" type="s" direction="in"/>
              <arg name="collection" type="o" direction="in"/>
            </method>
            <property name="Collections" type="ao" access="read"/>
            <signal name="CollectionCreated">
              <arg name="collection" type="o"/>
            </signal>
            <signal name="CollectionDeleted">
              <arg name="collection" type="o"/>
            </signal>
            <signal name="CollectionChanged">
              <arg name="collection" type="o"/>
            </signal>
          </interface>

        """

    static let collection = """
          <interface name="org.freedesktop.Secret.Collection">
            <method name="Delete">
              <arg name="prompt" type="o" direction="out"/>
            </method>
            <method name="SearchItems">
              <arg name="attributes" type="a{ss}" direction="in"/>
              <arg name="results" type="ao" direction="out"/>
            </method>
            <method name="CreateItem">
              <arg name="properties" type="a{sv}" direction="in"/>
              <arg name="secret" type="(oayays)" direction="in"/>
              <arg name="replace" type="b" direction="in"/>
              <arg name="item" type="o" direction="out"/>
              <arg name="prompt" type="o" direction="out"/>
            </method>
            <property name="Items" type="ao" access="read"/>
            <property name="Label" type="s" access="readwrite"/>
            <property name="Locked" type="b" access="read"/>
            <property name="Created" type="t" access="read"/>
            <property name="Modified" type="t" access="read"/>
            <signal name="ItemCreated">
              <arg name="item" type="o"/>
            </signal>
            <signal name="ItemDeleted">
              <arg name="item" type="o"/>
            </signal>
            <signal name="ItemChanged">
              <arg name="item" type="o"/>
            </signal>
          </interface>

        """

    static let item = """
          <interface name="org.freedesktop.Secret.Item">
            <method name="Delete">
              <arg name="Prompt" type="o" direction="out"/>
            </method>
            <method name="GetSecret">
              <arg name="session" type="o" direction="in"/>
              <arg name="secret" type="(oayays)" direction="out"/>
            </method>
            <method name="SetSecret">
              <arg name="secret" type="(oayays)" direction="in"/>
            </method>
            <property name="Locked" type="b" access="read"/>
            <property name="Attributes" type="a{ss}" access="readwrite"/>
            <property name="Label" type="s" access="readwrite"/>
            <property name="Created" type="t" access="read"/>
            <property name="Modified" type="t" access="read"/>
          </interface>

        """

    static let session = """
          <interface name="org.freedesktop.Secret.Session">
            <method name="Close"/>
          </interface>

        """

    static let prompt = """
          <interface name="org.freedesktop.Secret.Prompt">
            <method name="Prompt">
              <arg name="window-id" type="s" direction="in"/>
            </method>
            <method name="Dismiss"/>
            <signal name="Completed">
              <arg name="dismissed" type="b"/>
              <arg name="result" type="v"/>
            </signal>
          </interface>

        """

    static let standard = """
          <interface name="org.freedesktop.DBus.Introspectable">
            <method name="Introspect">
              <arg name="xml_data" type="s" direction="out"/>
            </method>
          </interface>
          <interface name="org.freedesktop.DBus.Properties">
            <method name="Get">
              <arg name="interface_name" type="s" direction="in"/>
              <arg name="property_name" type="s" direction="in"/>
              <arg name="value" type="v" direction="out"/>
            </method>
            <method name="GetAll">
              <arg name="interface_name" type="s" direction="in"/>
              <arg name="properties" type="a{sv}" direction="out"/>
            </method>
            <method name="Set">
              <arg name="interface_name" type="s" direction="in"/>
              <arg name="property_name" type="s" direction="in"/>
              <arg name="value" type="v" direction="in"/>
            </method>
            <signal name="PropertiesChanged">
              <arg name="interface_name" type="s"/>
              <arg name="changed_properties" type="a{sv}"/>
              <arg name="invalidated_properties" type="as"/>
            </signal>
          </interface>
          <interface name="org.freedesktop.DBus.Peer">
            <method name="Ping"/>
            <method name="GetMachineId">
              <arg name="machine_uuid" type="s" direction="out"/>
            </method>
          </interface>

        """

    /// Every Secret Service interface, as one document (the content of `dbus/org.freedesktop.Secrets.xml`).
    public static let interfaces = header + "<node>\n" + service + collection + item + session + prompt + "</node>\n"

    /// The document for one object: its interfaces and its children.
    static func document(interfaces body: String, children: [String]) -> String {
        header + "<node>\n" + standard + body + children.map { "  <node name=\"\($0)\"/>\n" }.joined() + "</node>\n"
    }
}

extension SecretService {
    func introspect(_ path: String) throws(DBusError) -> String {
        switch path {
        case "/": return Introspection.document(interfaces: "", children: ["org"])
        case "/org": return Introspection.document(interfaces: "", children: ["freedesktop"])
        case "/org/freedesktop": return Introspection.document(interfaces: "", children: ["secrets"])
        case "/org/freedesktop/secrets/collection":
            return Introspection.document(interfaces: "", children: collections.map(\.id))
        case "/org/freedesktop/secrets/aliases":
            return Introspection.document(interfaces: "", children: aliases.keys.sorted())
        case "/org/freedesktop/secrets/session", "/org/freedesktop/secrets/prompt":
            let prefix = path + "/"
            let paths = path.hasSuffix("session") ? Array(sessions.keys) : Array(prompts.keys)
            return Introspection.document(interfaces: "", children: paths.map { String($0.dropFirst(prefix.count)) })
        default:
            break
        }
        switch resolve(path) {
        case .service:
            return Introspection.document(
                interfaces: Introspection.service, children: ["collection", "aliases", "session", "prompt"])
        case .collection(let collection):
            let items = ((try? collection.itemReferences()) ?? []).map {
                String(ObjectPaths.item($0, in: collection.id).split(separator: "/").last ?? "")
            }
            return Introspection.document(interfaces: Introspection.collection, children: items)
        case .item:
            return Introspection.document(interfaces: Introspection.item, children: [])
        case .session:
            return Introspection.document(interfaces: Introspection.session, children: [])
        case .prompt:
            return Introspection.document(interfaces: Introspection.prompt, children: [])
        case nil:
            throw SecretServiceError.noSuchObject(path)
        }
    }
}
