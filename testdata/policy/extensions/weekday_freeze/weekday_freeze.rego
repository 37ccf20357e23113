# METADATA
# title: Weekday change freeze
# description: |
#   No changes on the weekdays listed in data.provgate_ext.weekday_freeze.days
#   (data.json: Friday), whoever asks: reads stay allowed. The weekday is the
#   server's clock in UTC.
# schemas:
#   - input: schema.input
package provgate.ext.weekday_freeze

reads := {"GET", "HEAD"}

deny contains sprintf("change freeze on %s: %s", [today, data.provgate_ext.weekday_freeze.reason]) if {
	not input.method in reads
	today in data.provgate_ext.weekday_freeze.days
}

today := time.weekday(time.now_ns())
