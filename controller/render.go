package controller

import (
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
)

// credentials are the logins a database's rendered files carry, from loam.toml and the
// environment variables it names.
func (d *DatabaseConfig) credentials() render.Credentials {
	cr := render.Credentials{Admin: render.Admin{User: d.AdminUser, Password: render.Secret(secret(d.AdminPasswordEnv))}}
	if d.AppUser != "" {
		cr.Users = append(cr.Users, render.User{Name: d.AppUser, Password: render.Secret(secret(d.AppPasswordEnv))})
	}
	if d.SchemaAdmin != "" {
		cr.SchemaAdmin = render.User{Name: d.SchemaAdmin, Password: render.Secret(secret(d.SchemaAdminPasswordEnv))}
	}
	return cr
}

// RenderFiles renders the record for its router with the database's credentials.
func RenderFiles(rec *shardmap.Record, d *DatabaseConfig) (render.Files, error) {
	if rec.Router.Kind == shardmap.Vitess {
		return render.Vitess(rec, d.credentials(), render.VitessOptions{})
	}
	return render.PgDog(rec, d.credentials(), render.PgDogOptions{TLS: render.TLS{Insecure: d.Insecure}})
}
