package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provgate/provgate/backend"
	"github.com/provgate/provgate/backend/eventbus"
)

// BenchmarkBurst: 50 TLS sockets each receive bursts of 20 events of about
// 2 KB, written one by one (batch1) or together (batch64).
func BenchmarkBurst(b *testing.B) {
	for _, mb := range []int{1, 64} {
		b.Run(fmt.Sprint("batch", mb), func(b *testing.B) {
			old := maxBatch
			maxBatch = mb
			defer func() { maxBatch = old }()
			bus := eventbus.NewBus(backend.NewCatalog())
			h := New(Options{Bus: bus, MaxPerPrincipal: 1000})
			up := websocket.Upgrader{}
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				release, _ := h.Admit("user:x")
				c, err := up.Upgrade(w, r, nil)
				if err != nil {
					return
				}
				h.Serve(context.Background(), c, Identity{Principal: "user:x"}, &fakeViewer{}, release)
			}))
			defer srv.Close()
			d := websocket.Dialer{TLSClientConfig: srv.Client().Transport.(*http.Transport).TLSClientConfig}
			const socks, burst = 50, 20
			got := make(chan int, socks)
			for i := 0; i < socks; i++ {
				c, _, err := d.Dial("wss"+strings.TrimPrefix(srv.URL, "https"), nil)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				_ = c.WriteMessage(websocket.TextMessage, []byte("register machines.update.*"))
				_, _, _ = c.ReadMessage()
				go func() {
					n := 0
					for {
						if _, _, err := c.ReadMessage(); err != nil {
							return
						}
						if n++; n%burst == 0 {
							got <- n
						}
					}
				}()
			}
			obj := json.RawMessage(`{"Pad":"` + strings.Repeat("x", 2000) + `"}`)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j := 0; j < burst; j++ {
					bus.Publish(context.Background(), backend.Event{Time: time.Now().UTC(), Type: "machines", Action: "update", Key: "k", Object: obj})
				}
				for k := 0; k < socks; k++ {
					<-got
				}
			}
		})
	}
}
