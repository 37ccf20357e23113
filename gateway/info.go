package gateway

import (
	"net"
	"os"
	"runtime"
	"sort"

	"github.com/gofiber/fiber/v2"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/gateway/claims"
)

// infoLicense is DRP's License bundle shape, filled from provgate's license.
type infoLicense struct {
	Contact      string            `json:"Contact"`
	ContactEmail string            `json:"ContactEmail"`
	Owner        string            `json:"Owner"`
	Version      string            `json:"Version"`
	Licenses     []infoLicenseItem `json:"Licenses"`
}

type infoLicenseItem struct {
	Name           string `json:"Name"`
	Version        string `json:"Version"`
	Data           []any  `json:"Data"`
	HardExpireDate string `json:"HardExpireDate"`
	SoftExpireDate string `json:"SoftExpireDate"`
	Active         bool   `json:"Active"`
	Expired        bool   `json:"Expired"`
}

type infoStat struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

// info is DRP's models.Info (mostly lower-case keys, docs/design.md §3.10).
type info struct {
	Arch            string               `json:"arch"`
	OS              string               `json:"os"`
	Version         string               `json:"version"`
	ID              string               `json:"id"`
	LocalID         string               `json:"local_id"`
	HaID            string               `json:"ha_id"`
	APIPort         int                  `json:"api_port"`
	FilePort        int                  `json:"file_port"`
	SecureFilePort  int                  `json:"secure_file_port"`
	DhcpPort        int                  `json:"dhcp_port"`
	BinlPort        int                  `json:"binl_port"`
	TftpPort        int                  `json:"tftp_port"`
	TftpEnabled     bool                 `json:"tftp_enabled"`
	DhcpEnabled     bool                 `json:"dhcp_enabled"`
	BinlEnabled     bool                 `json:"binl_enabled"`
	ProvEnabled     bool                 `json:"prov_enabled"`
	SecureProv      bool                 `json:"secure_prov_enabled"`
	Address         string               `json:"address"`
	ServerHostname  string               `json:"server_hostname"`
	Manager         bool                 `json:"manager"`
	Stats           []infoStat           `json:"stats"`
	Features        []string             `json:"features"`
	Scopes          map[string]any       `json:"scopes"`
	License         infoLicense          `json:"License"`
	Errors          []string             `json:"errors"`
	HaEnabled       bool                 `json:"ha_enabled"`
	HaVirtual       string               `json:"ha_virtual_address"`
	HaIsActive      bool                 `json:"ha_is_active"`
	HaStatus        string               `json:"ha_status"`
	HaActiveID      string               `json:"ha_active_id"`
	HaPassiveState  []any                `json:"ha_passive_state"`
	ProvgateLicense backend.LicenseState `json:"provgate_license"`
	ProvgatePolicy  infoPolicy           `json:"provgate_policy"`
	ClusterState    map[string]any       `json:"ClusterState"`
}

// infoPolicy names the policy this replica serves (docs/design.md §9.4):
// replicas serving the same policy report the same revision.
type infoPolicy struct {
	Revision string `json:"revision"`
}

// revisioner is implemented by deciders that name their policy
// (policies/opa Engine.Revision).
type revisioner interface {
	Revision() string
}

// Features provgate reports (capability flags, not license state).
var features = []string{"api-v3", "sane-exit-codes", "roles", "tenants", "secure-params", "slim-objects",
	"secure-param-upgrade", "pools", "callback-plugin", "json-patch", "policy-engine"}

// buildInfo assembles /api/v3/info.
func (i infoRoutes) build(c *fiber.Ctx) info {
	host, _ := os.Hostname()
	addr, port := "", 0
	if ta, ok := c.Context().LocalAddr().(*net.TCPAddr); ok {
		port = ta.Port
		if !ta.IP.IsUnspecified() {
			addr = ta.IP.String()
		}
	}
	scopes := map[string]any{}
	for _, sc := range i.kinds.Scopes() {
		acts := map[string]any{}
		for _, a := range i.kinds.Actions(sc) {
			acts[a] = map[string]any{}
		}
		scopes[sc] = acts
	}
	lic := backend.LicenseState{Features: []string{}}
	if i.license != nil {
		lic = i.license.LicenseState(userContext(c))
	}
	items := []infoLicenseItem{}
	if lic.Valid {
		fs := append([]string{}, lic.Features...)
		sort.Strings(fs)
		for _, f := range fs {
			items = append(items, infoLicenseItem{Name: f, Version: "v1", Data: []any{}, HardExpireDate: lic.Expires,
				SoftExpireDate: lic.Expires, Active: true})
		}
	}
	var pol infoPolicy
	if r, ok := i.policy.(revisioner); ok {
		pol.Revision = r.Revision()
	}
	return info{
		Arch: runtime.GOARCH, OS: runtime.GOOS, Version: i.version, ID: host, LocalID: host, HaID: host,
		APIPort: port, Address: addr, ServerHostname: host,
		Stats: []infoStat{}, Features: append([]string{}, features...), Scopes: scopes,
		License: infoLicense{Owner: lic.Owner, Licenses: items}, Errors: []string{}, HaIsActive: true, HaStatus: "Up",
		HaPassiveState: []any{}, ProvgateLicense: lic, ClusterState: map[string]any{},
		ProvgatePolicy: pol,
	}
}

// infoRoutes serves the server's info (DRP's models.Info).
type infoRoutes struct {
	kinds   *backend.Catalog
	license Licenser
	policy  Decider
	version string
}

func (i infoRoutes) serves() serves { return serves{claims.ServeInfo: i.get} }

func (i infoRoutes) get(c *fiber.Ctx) error { return c.JSON(i.build(c)) }
